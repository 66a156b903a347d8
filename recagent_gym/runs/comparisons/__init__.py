"""Comparisons built on training, held-out evaluation and the agreement test's real metric: the RL comparison
(at several env seeds) and the transfer of policies trained on distilled users."""
