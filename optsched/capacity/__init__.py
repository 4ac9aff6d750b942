"""Free capacity and who may use it: node state, eligibility, pods that fit, fragmentation.

The snapshot says what exists; this package answers what is free, which nodes a
PodSet may use at all (:mod:`eligibility`), how many of its pods a node can take
now (:mod:`fit`), and how usable the free capacity is for the queue
(:mod:`fragmentation`). The solver, the greedy baselines and the deferral reasons
all ask here, so they agree.
"""
