"""Where objects come from: manifests (files, folders, stdin) and Pulumi resources."""
