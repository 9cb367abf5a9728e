"""`kubectl brokergroup`: a kubectl plugin that shows and drives a BrokerGroup through the API server only.

Pure cores (`snapshot`, `render`, `targets`) turn API objects into a frozen snapshot and the snapshot into text;
`kube` is the I/O shell (the `kubernetes` client, the API server's service and pod proxies); `cli` wires them.
"""
