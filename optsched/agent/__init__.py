"""The node agent (``optsched agent``): what a GPU node tells the planner, and MIG layouts applied safely.

One agent runs per GPU node (a DaemonSet); in tests and demos one process may
serve many simulated nodes. Per node and cycle it discovers the GPUs and their
links through a backend (NVML on real hardware, a hardware profile for
simulated nodes), marks GPUs unhealthy on critical XID errors, reads the
devices pods really hold, applies the desired MIG layout where it changed,
and publishes all of it: the ``optsched.io/gpu-topology`` annotation and a
cluster-scoped ``NodeGPUs`` object named after the node.

The pure parts (devices, islands, profiles, health, allocation, MIG apply,
what gets published) never import a Kubernetes client; ``optsched.agent.run``
is the only module here that talks to the API server, through ``optsched.kube``.
"""
