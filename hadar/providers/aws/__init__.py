"""The ``aws`` provider: EC2 instances launched, listed and terminated with boto3, reached over SSH."""
