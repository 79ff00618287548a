"""The process's configuration: every setting declared once and read from the environment once, the cores the
process may use, and the platform ``oip serve`` runs on.

May import: adapters (domain errors, Triton's settings type). Never the protocol, a transport or a codec.
"""
