"""optsched: joint CP-SAT placement of GPU gangs for Kubernetes and Kueue."""

__version__ = "0.1.0"
