"""Synthetic gaze data: the eye renderer (render), subjects and their traits (traits),
the domains (domains), the appearance and control worlds (worlds) and rendered data sets
(dataset). Public names are exported from genlab.gaze."""
