# Lints or renders a Helm chart with Helm's own engine (helm_python, the Helm v4 Go SDK) and
# prints the result as one JSON object on stdout, for the Rust tests to read.
#
#   python3 render.py lint CHART
#       {"errors": [str], "warnings": [str], "info": [str]}
#   python3 render.py render CHART VALUES_JSON_FILE RELEASE NAMESPACE
#       {"manifests": [object, ...]}  or, when Helm refuses the values or a template fails,
#       {"error": str}
#   python3 render.py install|upgrade CHART VALUES_JSON_FILE RELEASE NAMESPACE KUBECONFIG
#   python3 render.py uninstall RELEASE NAMESPACE KUBECONFIG
#       Helm's own install / upgrade / uninstall against the cluster of KUBECONFIG, with its
#       default storage (release Secrets, written by client-go in protobuf):
#       {"release": {name, namespace, revision, status, ...}}  or  {"error": str}
#
# Both exit 0 whenever they could print such an object; anything else (bad arguments, no
# helm_python) is a traceback and a non-zero exit.
import json
import sys

import helm_python
import yaml


def lint(chart):
    report = helm_python.lint(chart)
    # Each message has a severity: 1 info, 2 warning, 3 error (0 unknown: counted as error).
    by_severity = {"errors": [], "warnings": [], "info": []}
    for message in report.get("messages", []):
        key = {1: "info", 2: "warnings"}.get(message.get("severity"), "errors")
        text = str(message.get("error", "")).strip()
        by_severity[key].append(f"{message['path']}: {text}" if message.get("path") else text)
    # "errors" of the report repeats the error messages without their path: add only others.
    for error in report.get("errors", []):
        error = str(error).strip()
        if not any(seen.endswith(error) for seen in by_severity["errors"]):
            by_severity["errors"].append(error)
    return by_severity


def render(chart_path, values_file, release, namespace):
    with open(values_file, encoding="utf-8") as f:
        values = json.load(f)
    chart = helm_python.Chart.load(chart_path)
    try:
        # Offline, as `helm template`: an install (so .Release.IsInstall is true), no cluster
        # contacted. It validates the values against values.schema.json first.
        rendered = chart.render(values, name=release, namespace=namespace, is_install=True)
    except helm_python.HelmError as error:
        return {"error": str(error)}
    # render returns templates/ only, never crds/; like `helm install` (and
    # `helm template --include-crds`) the CRDs are added first, from Chart.crds.
    texts = [crd["data"] for crd in chart.crds]
    texts += [text for path, text in sorted(rendered.items()) if not path.endswith("NOTES.txt")]
    manifests = []
    for text in texts:
        manifests += [doc for doc in yaml.safe_load_all(text) if doc]
    return {"manifests": manifests}


def release_of(result):
    # install/upgrade return the release; uninstall wraps it with an `info` text.
    release = result.get("release", result) if isinstance(result, dict) else result
    return {"release": release}


def act(verb, chart_path, values_file, release, namespace, kubeconfig):
    with open(values_file, encoding="utf-8") as f:
        values = json.load(f)
    config = helm_python.Config(kubeconfig_path=kubeconfig, namespace=namespace)
    try:
        if verb == "install":
            result = config.install(chart_path, release, values, namespace=namespace, timeout=120)
        else:
            result = config.upgrade(chart_path, release, values, namespace=namespace, timeout=120)
    except helm_python.HelmError as error:
        return {"error": str(error)}
    return release_of(result)


def uninstall(release, namespace, kubeconfig):
    config = helm_python.Config(kubeconfig_path=kubeconfig, namespace=namespace)
    try:
        return release_of(config.uninstall(release, timeout=120))
    except helm_python.HelmError as error:
        return {"error": str(error)}


def main(argv):
    if len(argv) == 3 and argv[1] == "lint":
        result = lint(argv[2])
    elif len(argv) == 6 and argv[1] == "render":
        result = render(*argv[2:])
    elif len(argv) == 7 and argv[1] in ("install", "upgrade"):
        result = act(*argv[1:])
    elif len(argv) == 5 and argv[1] == "uninstall":
        result = uninstall(*argv[2:])
    else:
        sys.exit(
            f"usage: {argv[0]} lint CHART | render CHART VALUES_JSON_FILE RELEASE NAMESPACE | "
            "install|upgrade CHART VALUES_JSON_FILE RELEASE NAMESPACE KUBECONFIG | "
            "uninstall RELEASE NAMESPACE KUBECONFIG"
        )
    json.dump(result, sys.stdout)
    print()


if __name__ == "__main__":
    main(sys.argv)
