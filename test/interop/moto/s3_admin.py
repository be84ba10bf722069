"""The test's independent S3 client (boto3) against the moto server.

Usage: python s3_admin.py <endpoint> <command> [args...]

  setup <bucket>                 create an IAM user allowed s3:*, its access key, and the bucket
                                 (the server's four unauthenticated requests); prints the key as
                                 JSON {"access_key_id", "secret_access_key"}
  put <bucket> <key> <file>      upload a file (credentials from AWS_* variables)
  list <bucket> <prefix>         print the keys under a prefix as a JSON list
  get <bucket> <key>             print the object's bytes to stdout
"""

import json
import sys

import boto3

REGION = "us-east-1"


def client(service, endpoint, **credentials):
    return boto3.client(service, endpoint_url=endpoint, region_name=REGION, **credentials)


def main():
    endpoint, command, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    if command == "setup":
        bootstrap = {"aws_access_key_id": "bootstrap", "aws_secret_access_key": "bootstrap"}
        iam = client("iam", endpoint, **bootstrap)
        iam.create_user(UserName="touchstone")
        iam.put_user_policy(
            UserName="touchstone",
            PolicyName="s3",
            PolicyDocument=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
                }
            ),
        )
        key = iam.create_access_key(UserName="touchstone")["AccessKey"]
        client("s3", endpoint, **bootstrap).create_bucket(Bucket=args[0])
        print(
            json.dumps(
                {"access_key_id": key["AccessKeyId"], "secret_access_key": key["SecretAccessKey"]}
            )
        )
    elif command == "put":
        client("s3", endpoint).upload_file(args[2], args[0], args[1])
    elif command == "list":
        pages = client("s3", endpoint).get_paginator("list_objects_v2").paginate(
            Bucket=args[0], Prefix=args[1]
        )
        print(json.dumps([o["Key"] for page in pages for o in page.get("Contents", [])]))
    elif command == "get":
        body = client("s3", endpoint).get_object(Bucket=args[0], Key=args[1])["Body"].read()
        sys.stdout.buffer.write(body)
    else:
        raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    main()
