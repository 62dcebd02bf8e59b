"""Checking an answer against its declaration (`collections_app.schemas`, `memory_app.schemas`)."""

import jsonschema
from pydantic import BaseModel

from ragsite.schemas import json_schema_of


def closed(schema):
    """``schema`` with every object closed: a key the declaration does not name is an error
    (unless the model itself allows extra keys)."""
    if isinstance(schema, dict):
        schema = {key: closed(value) for key, value in schema.items()}
        if "properties" in schema and "additionalProperties" not in schema:
            schema["additionalProperties"] = False
        return schema
    if isinstance(schema, list):
        return [closed(item) for item in schema]
    return schema


def assert_declared(answer: dict, model: type[BaseModel]) -> None:
    """`answer` (JSON-ready) holds every key ``model`` requires, of its type, and no key it does not
    declare, at every depth."""
    jsonschema.validate(answer, closed(json_schema_of(model)), format_checker=jsonschema.FormatChecker())


def every_key(model: type[BaseModel]) -> set[str]:
    return {field.alias or name for name, field in model.model_fields.items()}


def required_keys(model: type[BaseModel]) -> set[str]:
    return {field.alias or name for name, field in model.model_fields.items() if field.is_required()}
