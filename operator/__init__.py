"""The BrokerGroup operator (kopf): CR -> child objects, status, and (part 2) the controller's view.

Pure modules (`spec`, `names`, `labels`, `builders`, `conditions`, `plan`) turn a BrokerGroup into the
objects it should own; `reconcile` and `kube` are the I/O shells; `handlers` wires them into kopf.
"""
