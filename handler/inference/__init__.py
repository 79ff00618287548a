"""The inference operation every transport calls: between the transports (``rest``, ``grpc``, ``batch``) and the
codecs and observability it uses (``service.py``)."""
