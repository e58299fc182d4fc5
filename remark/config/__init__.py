"""The run config: ``RemarkGRPOConfig`` (TRL's ``GRPOConfig`` + rank-level fields), split by concern.

- ``remark.config.fields``: the dataclass and every field's help;
- ``remark.config.validate``: valid values and contradictions, checked in ``__post_init__``, after every
  field's type (``remark.config.fieldtypes``) and range (``remark.config.ranges``: the one table of
  numeric ranges, which the CLI's numeric flags use too);
- ``remark.config.effects``: the one table of settings that act only under others (a setting given with
  no effect is refused or noted; checked by ``load_config``, which knows who set each value);
- ``remark.config.paths``: the dataset and model a run reads exist (checked by ``remark train``);
- ``remark.config.files``: flat YAML files -> validated config (``load_config``);
- ``remark.config.compose``: recipe < config file < ``--set`` (``compose_config``, what ``remark train`` uses).

The names are imported on first use (PEP 562 ``__getattr__``): ``remark.config.ranges`` (every CLI module's
numeric flags) then loads no TRL, so ``remark --help`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from catalog._lazy import lazy_exports

#: public name -> the module that defines it
_LAZY_EXPORTS: dict[str, str] = {
    "Composed": "remark.config.compose",
    "Override": "remark.config.compose",
    "compose_config": "remark.config.compose",
    "RemarkGRPOConfig": "remark.config.fields",
    "check_field_names": "remark.config.files",
    "config_field_names": "remark.config.files",
    "load_config": "remark.config.files",
    "read_config_values": "remark.config.files",
    "check_model_path": "remark.config.paths",
    "validate_paths": "remark.config.paths",
    "validate_remark_fields": "remark.config.validate",
    "validate_remark_layout": "remark.config.validate",
}

if TYPE_CHECKING:
    from remark.config.compose import Composed, Override, compose_config
    from remark.config.fields import RemarkGRPOConfig
    from remark.config.files import check_field_names, config_field_names, load_config, read_config_values
    from remark.config.paths import check_model_path, validate_paths
    from remark.config.validate import validate_remark_fields, validate_remark_layout


__getattr__, __dir__ = lazy_exports("remark.config", _LAZY_EXPORTS, globals())

__all__ = [
    "Composed",
    "Override",
    "RemarkGRPOConfig",
    "check_field_names",
    "check_model_path",
    "compose_config",
    "config_field_names",
    "load_config",
    "read_config_values",
    "validate_paths",
    "validate_remark_fields",
    "validate_remark_layout",
]
