"""Promotion: the gate a challenger passes to become the champion (:mod:`.gate`), the promotion that runs it and
moves the registry alias (:mod:`.promote`), what a signal does to one (:mod:`.stops`), and the status of the
champion and its challengers (:mod:`.status`)."""
