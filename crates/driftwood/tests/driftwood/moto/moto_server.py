#!/usr/bin/env python3
"""moto's server for driftwood's AWS adapter tests, seeded like an EKS account.

usage: moto_server.py CLUSTER [REGION]

Starts moto on a free 127.0.0.1 port, seeds it and prints one JSON line (endpoint, ids), then
serves until its standard input closes. Seeded:
  - EKS-optimized AL2 AMIs for Kubernetes 1.27-1.30, amd64 and arm64, owned by Amazon's EKS
    account, with EKS-style names and increasing creation dates (through MOTO_AMIS_PATH, which
    replaces moto's default images);
  - the public SSM parameters /aws/service/eks/optimized-ami/... for them. moto refuses
    PutParameter under /aws/ and has no EKS parameters of its own, so they are written into
    its backend directly;
  - a VPC with one subnet per zone (a, b, c) and a security group, tagged
    karpenter.sh/discovery=CLUSTER, plus an untagged subnet;
  - the node role KarpenterNodeRole-CLUSTER.
"""
import datetime
import json
import os
import sys
import tempfile

ACCOUNT = "123456789012"
EKS_OWNER = "602401143452"
RELEASES = {"1.27": "2024-05-01", "1.28": "2024-06-12", "1.29": "2024-08-07", "1.30": "2024-09-17"}


def amis():
    out = []
    for n, (version, date) in enumerate(sorted(RELEASES.items())):
        stamp = date.replace("-", "")
        for arch, prefix in (("x86_64", "amazon-eks-node"), ("arm64", "amazon-eks-arm64-node")):
            out.append({
                "ami_id": "ami-0e%s%02d%s" % ("a" if arch == "x86_64" else "b", n, "0" * 12),
                "name": "%s-%s-v%s" % (prefix, version, stamp),
                "description": "EKS Kubernetes Worker AMI with AmazonLinux2 image, (k8s: %s)" % version,
                "owner_id": EKS_OWNER,
                "public": True,
                "virtualization_type": "hvm",
                "architecture": arch,
                "state": "available",
                "platform": None,
                "image_type": "machine",
                "hypervisor": "xen",
                "root_device_name": "/dev/xvda",
                "root_device_type": "ebs",
                "sriov": "simple",
                "tags": {},
                "_date": date,
                "_version": version,
            })
    return out


def main():
    cluster = sys.argv[1]
    region = sys.argv[2] if len(sys.argv) > 2 else "us-west-2"
    images = amis()
    fd, path = tempfile.mkstemp(suffix=".json", prefix="moto-amis-")
    with os.fdopen(fd, "w") as f:
        json.dump([{k: v for k, v in i.items() if not k.startswith("_")} for i in images], f)
    # moto reads MOTO_AMIS_PATH when its EC2 module loads: set it before importing moto.
    os.environ["MOTO_AMIS_PATH"] = path
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    import boto3
    from moto.ec2.models import ec2_backends
    from moto.server import ThreadedMotoServer
    from moto.ssm.models import Parameter, ssm_backends

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    port = server._server.server_port
    endpoint = "http://127.0.0.1:%d" % port

    # Creation dates: moto's AMI file cannot carry them (a date there breaks every backend
    # after the first), so they are set on the loaded images.
    backend = ec2_backends[ACCOUNT][region]
    for image in images:
        ami = backend.amis[image["ami_id"]]
        ami.creation_date = datetime.datetime.fromisoformat(image["_date"]).replace(
            tzinfo=datetime.timezone.utc)

    parameters = ssm_backends[ACCOUNT][region]._parameters
    for image in images:
        arch = image["architecture"]
        variants = ["amazon-linux-2" if arch == "x86_64" else "amazon-linux-2-arm64",
                    "amazon-linux-2023/%s/standard" % arch]
        for variant in variants:
            name = "/aws/service/eks/optimized-ami/%s/%s/recommended/image_id" % (image["_version"], variant)
            parameters[name] = [Parameter(
                account_id=ACCOUNT, name=name, value=image["ami_id"], parameter_type="String",
                description=None, allowed_pattern=None, keyid=None,
                last_modified_date=datetime.datetime.now(datetime.timezone.utc),
                version=1, data_type="aws:ec2:image")]

    kw = dict(endpoint_url=endpoint, region_name=region)
    ec2 = boto3.client("ec2", **kw)
    iam = boto3.client("iam", **kw)
    discovery = [{"Key": "karpenter.sh/discovery", "Value": cluster}]
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16",
                         TagSpecifications=[{"ResourceType": "vpc", "Tags": discovery}])["Vpc"]["VpcId"]
    subnets = {}
    for i, zone in enumerate(["a", "b", "c"]):
        az = region + zone
        subnets[az] = ec2.create_subnet(
            VpcId=vpc, CidrBlock="10.0.%d.0/24" % i, AvailabilityZone=az,
            TagSpecifications=[{"ResourceType": "subnet", "Tags": discovery + [
                {"Key": "Name", "Value": "%s-private-%s" % (cluster, az)}]}])["Subnet"]["SubnetId"]
    untagged = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.9.0/24",
                                 AvailabilityZone=region + "a")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(
        GroupName="%s-node" % cluster, Description="nodes of %s" % cluster, VpcId=vpc,
        TagSpecifications=[{"ResourceType": "security-group", "Tags": discovery}])["GroupId"]
    trust = json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]})
    role = "KarpenterNodeRole-%s" % cluster
    iam.create_role(RoleName=role, AssumeRolePolicyDocument=trust)

    print(json.dumps({
        "endpoint": endpoint, "region": region, "cluster": cluster, "account": ACCOUNT,
        "vpc": vpc, "subnets": subnets, "untagged_subnet": untagged, "security_group": group,
        "role": role, "amis": {i["name"]: i["ami_id"] for i in images},
    }), flush=True)
    try:
        sys.stdin.read()
    finally:
        server.stop()
        os.unlink(path)


if __name__ == "__main__":
    main()
