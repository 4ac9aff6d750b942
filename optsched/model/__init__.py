"""The values every stage shares: the frozen snapshot, placements, the plan, and every name.

* :mod:`~optsched.model.snapshot`: the cluster at one instant (nodes, usage, the queue, quotas);
* :mod:`~optsched.model.placement`: which pod goes to which node and GPUs;
* :mod:`~optsched.model.plan`: the plan a person or the controller reads;
* :mod:`~optsched.model.names`: labels, annotations, gates, resources and API groups.
"""
