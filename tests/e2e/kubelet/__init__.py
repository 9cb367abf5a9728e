"""A test kubelet for the e2e tier: pods of the real apiserver run as local processes in network namespaces.

`Kubelet` (kubelet.py) is the entry; the `kubelet` fixture of tests/e2e/conftest.py starts one per test.
docs/k8s-test-env.md ("The test kubelet") says what it does and where it differs from a real kubelet.
"""

from tests.e2e.kubelet.kubelet import NODE_NAME, Kubelet, KubeletError, missing_requirements

__all__ = ["NODE_NAME", "Kubelet", "KubeletError", "missing_requirements"]
