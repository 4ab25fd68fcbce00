"""The share monitor Lambda of Batch quota-management queues (see :mod:`.handler`)."""
