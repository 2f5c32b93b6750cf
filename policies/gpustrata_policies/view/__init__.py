"""The view the rules read: Kubernetes-shaped objects, pools from every source, the GPU
Operator, KubeRay and the vLLM engines (one reader)."""
