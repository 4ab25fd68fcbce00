"""The quota window switcher Lambda of Batch quota management and HyperPod (see :mod:`.handler`)."""
