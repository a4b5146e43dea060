# Server-side apply through Python's kubernetes client (its dynamic client's
# server_side_apply, as GitOps tools written in Python use it) against the embedded API server.
# Prints one JSON object of what it saw, for the Rust test to check.
#
#   python3 server_side_apply.py KUBECONFIG
import json
import sys

from kubernetes import client, config
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient


def main(kubeconfig):
    api_client = config.new_client_from_config(config_file=kubeconfig)
    dynamic = DynamicClient(api_client)
    deployments = dynamic.resources.get(api_version="apps/v1", kind="Deployment")
    seen = {}

    manifest = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "api", "namespace": "default", "labels": {"app": "api"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "api"}},
            "template": {
                "metadata": {"labels": {"app": "api"}},
                "spec": {"containers": [{"name": "api", "image": "api:1"}]},
            },
        },
    }
    created = deployments.server_side_apply(
        body=manifest, namespace="default", field_manager="flux"
    )
    seen["created_managers"] = [m["manager"] for m in created.metadata.managedFields]

    # A second tool changes the image flux owns: a conflict, then forced.
    other = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "api", "namespace": "default"},
        "spec": {"template": {"spec": {"containers": [{"name": "api", "image": "api:2"}]}}},
    }
    try:
        deployments.server_side_apply(body=other, namespace="default", field_manager="argocd")
        seen["conflict"] = None
    except ApiException as error:
        seen["conflict"] = {"status": error.status, "message": json.loads(error.body)["message"]}
    forced = deployments.server_side_apply(
        body=other, namespace="default", field_manager="argocd", force_conflicts=True
    )
    seen["forced_image"] = forced.spec.template.spec.containers[0].image

    # flux applies again without replicas: replicas leave the object (the Deployment's default
    # of 1 comes back, as kube-apiserver defaults it).
    del manifest["spec"]["replicas"]
    manifest["spec"]["template"]["spec"]["containers"][0]["image"] = "api:2"
    reapplied = deployments.server_side_apply(
        body=manifest, namespace="default", field_manager="flux"
    )
    seen["replicas_after"] = reapplied.spec.replicas

    # The typed client reads managedFields as kube-apiserver writes them.
    typed = client.AppsV1Api(api_client).read_namespaced_deployment("api", "default")
    seen["typed_managers"] = sorted(
        (m.manager, m.operation) for m in typed.metadata.managed_fields
    )
    json.dump(seen, sys.stdout)
    print()


if __name__ == "__main__":
    main(sys.argv[1])
