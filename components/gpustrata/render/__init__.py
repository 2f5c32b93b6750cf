"""Pure renderers: plan -> component args -> Kubernetes objects and text artefacts."""
