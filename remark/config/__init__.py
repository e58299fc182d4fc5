"""The run config: ``RemarkGRPOConfig`` (TRL's ``GRPOConfig`` + rank-level fields), split by concern.

- ``remark.config.fields``: the dataclass and every field's help;
- ``remark.config.validate``: valid values and contradictions, checked in ``__post_init__``, after every
  field's type (``remark.config.fieldtypes``) and range (``remark.config.ranges``);
- ``remark.config.paths``: the dataset and model a run reads exist (checked by ``remark train``);
- ``remark.config.files``: flat YAML files -> validated config (``load_config``);
- ``remark.config.compose``: recipe < config file < ``--set`` (``compose_config``, what ``remark train`` uses).
"""

from remark.config.compose import Composed, Override, compose_config
from remark.config.fields import RemarkGRPOConfig
from remark.config.files import check_field_names, config_field_names, load_config, read_config_values
from remark.config.paths import check_model_path, validate_paths
from remark.config.validate import validate_remark_fields, validate_remark_layout

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
