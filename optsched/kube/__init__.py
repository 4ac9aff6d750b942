"""The only package that talks to a Kubernetes API server (read-only).

Everything else in optsched works on snapshots; keeping the client here means
the planner, policies and validator can be tested and run offline.
"""
