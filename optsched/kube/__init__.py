"""The only package that talks to a Kubernetes API server.

One transport (:mod:`~optsched.kube.client`), the read-only snapshot reader
(:mod:`~optsched.kube.reader`, with the list conversion in
:mod:`~optsched.kube.documents`) and every write the controller makes
(:mod:`~optsched.kube.writer`). Everything else in optsched works on values,
so the planner, the validator and the controller's decisions can be tested and
run offline.
"""
