"""Perdure's gateway: the public, validating WorkflowService."""
