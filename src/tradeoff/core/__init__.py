"""The typed core, the floor every other package stands on: run specs (``spec``), parameter declarations and
their ranges (``params``, ``ranges``), the runtime's settings and the device (``settings``, ``runtime``, ``gpus``),
the one registry style (``registry``) and how registries find their plug-ins (``plugins``), what a step costs in
passes (``passes``), the kinds a target names (``targets``), errors (``errors``), progress lines (``progress``) and
lazily imported heavy modules (``lazy_imports``).

May import: nothing of this package's other parts.
"""
