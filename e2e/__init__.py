"""End-to-end tests and the local Kubernetes + Kueue + KWOK control plane they run on."""
