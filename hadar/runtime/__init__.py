"""The real round loop (``hadar run``): the same policies as the simulator, driving training
workers on local, SSH or AWS nodes, with the Job Tracker averaging HadarE's copies."""
