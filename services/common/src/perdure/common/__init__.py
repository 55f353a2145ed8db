"""Runtime shared by Perdure's services; never imported by the SDK."""
