"""cdk8s charts for the Kubernetes side of the platform."""
