"""The primal-dual core of Hadar: utilities, prices, FIND_ALLOC and the DP over the queue.

Pure and numpy-based: no I/O, no clocks, no global state.
"""
