"""Model backends behind one interface, and the model repository."""
