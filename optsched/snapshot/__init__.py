"""The cluster, read: documents in, the frozen snapshot out, and YAML that Kubernetes reads back.

Raw objects (plain dicts from a file or the live reader) are parsed field by
field with errors that name the object and field (:mod:`fields`,
:mod:`quantity`, :mod:`pods`, :mod:`nodes`, :mod:`scheduling`,
:mod:`kueue_objects`), and :mod:`build` assembles the
:class:`~optsched.model.snapshot.Snapshot` every later stage reads.
"""
