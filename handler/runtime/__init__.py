"""Process plumbing: building the data plane for this process, its event loop, memory, and warm-up."""
