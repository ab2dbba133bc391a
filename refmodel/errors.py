"""Error types of wgref.

Every error a user can trigger with bad input is one of these, carrying one
sentence that names the rule that was broken.  They subclass the built-in
``ValueError`` / ``TypeError`` so ordinary ``except ValueError`` code catches them.
"""


class WgrefError(Exception):
    """Base class of every error wgref raises on purpose."""


class FormError(WgrefError, ValueError):
    """An instruction string names a form that sm_90a does not have."""


class InputError(WgrefError, ValueError):
    """An input value, shape or option breaks a rule."""


class DTypeError(WgrefError, TypeError):
    """An input array has a dtype the operation does not accept."""


class DeviceError(WgrefError, RuntimeError):
    """No usable GPU: cupy missing, no driver, or not an sm_90 device."""


class UnmodelledError(WgrefError, NotImplementedError):
    """The instruction is valid and recorded on the H200, but wgref has no model that reproduces it."""
