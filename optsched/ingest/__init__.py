"""Turning Kubernetes and Kueue objects (plain dicts) into the frozen snapshot model."""
