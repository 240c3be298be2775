package main

// valuesSchema is the chart's values.schema.json: Helm checks the values
// against it before rendering, so an unknown key (a typo, a value of
// another chart) or a wrong type fails the install with the key's name
// instead of rendering something else. test/chart checks it against
// values.yaml and with wrong values.
var valuesSchema = []byte(`{
  "$schema": "https://json-schema.org/draft-07/schema#",
  "title": "winready",
  "type": "object",
  "additionalProperties": false,
  "definitions": {
    "stringMap": {"type": "object", "additionalProperties": {"type": "string"}},
    "labelsOnly": {
      "type": "object",
      "additionalProperties": false,
      "properties": {
        "enabled": {"type": "boolean"},
        "labels": {"$ref": "#/definitions/stringMap"}
      }
    }
  },
  "properties": {
    "global": {"type": "object"},
    "image": {
      "type": "object",
      "additionalProperties": false,
      "required": ["repository", "digest"],
      "properties": {
        "registry": {"type": "string"},
        "repository": {"type": "string", "minLength": 1},
        "digest": {"type": "string"}
      }
    },
    "imagePullSecrets": {
      "type": "array",
      "items": {
        "type": "object",
        "additionalProperties": false,
        "required": ["name"],
        "properties": {"name": {"type": "string", "minLength": 1}}
      }
    },
    "podLabels": {"$ref": "#/definitions/stringMap"},
    "podAnnotations": {"$ref": "#/definitions/stringMap"},
    "extraArgs": {"type": "array", "items": {"type": "string"}},
    "extraEnv": {
      "type": "array",
      "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string", "minLength": 1}}}
    },
    "replicas": {"type": "integer", "minimum": 1},
    "resources": {"type": "object"},
    "nodeSelector": {"$ref": "#/definitions/stringMap"},
    "tolerations": {"type": "array", "items": {"type": "object"}},
    "priorityClassName": {"type": "string"},
    "crds": {
      "type": "object",
      "additionalProperties": false,
      "properties": {"enabled": {"type": "boolean"}, "keep": {"type": "boolean"}}
    },
    "rbac": {
      "type": "object",
      "additionalProperties": false,
      "properties": {"aggregateToEdit": {"type": "boolean"}}
    },
    "commonAnnotations": {"$ref": "#/definitions/stringMap"},
    "serviceMonitor": {"$ref": "#/definitions/labelsOnly"},
    "prometheusRule": {"$ref": "#/definitions/labelsOnly"}
  }
}
`)
