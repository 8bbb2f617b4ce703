"""Names and resource keys shared by the cluster charts, the workloads and the tests."""

FSX_CLAIM = "fsx-claim"  # the ReadWriteMany claim the training pods mount at /data
FSX_MOUNT_PATH = "/data"

NEURON_RESOURCE = "aws.amazon.com/neuron"  # Trainium chips; `neurondevice` was removed in Neuron 2.22
NEURONCORE_RESOURCE = "aws.amazon.com/neuroncore"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
GPU_RESOURCE = "nvidia.com/gpu"

NEURON_TAINT_KEY = "aws.amazon.com/neuron"  # NoSchedule taint on the Trainium nodes
GPU_TAINT_KEY = "nvidia.com/gpu"  # NoSchedule taint on the Triton GPU nodes
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
NODE_ROLE_LABEL = "ml-platform/node-role"  # values: system, trainium, gpu
