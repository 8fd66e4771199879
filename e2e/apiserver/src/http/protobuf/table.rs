//! The message table: for every protobuf message of the built-in kinds served here, its fields' numbers, JSON
//! names and types, read from `messages.txt`. That file is generated from k8s-pb (kube-rs' Kubernetes protobuf
//! bindings: the field numbers and types) and k8s-openapi's schemas (the JSON names and required fields), with
//! `pointers.txt` (which scalar fields are pointers in Kubernetes' Go types), by the test in `generate.rs`, which
//! also checks it stays in step with them.
//!
//! Line format: `root <apiVersion> <kind> <message>` names the message of a kind; `message <id> [=<special>]
//! <field>...` with each field `<number>,<json name>,<label>,<type>[,<flags>]`: label `o` (optional), `r`
//! (repeated), `m` (a map from strings) or `i` (a message inlined in the parent's JSON); type a scalar (`string`, `int32`, `int64`, `bool`, `bytes`, `double`)
//! or a message id; flags `p` (a Go pointer: a zero value is kept) and `q` (required: a zero value is kept).

use std::collections::HashMap;
use std::sync::OnceLock;

use super::ProtobufError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    String,
    Int32,
    Int64,
    Bool,
    Bytes,
    Double,
}

impl Scalar {
    fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "string" => Self::String,
            "int32" => Self::Int32,
            "int64" => Self::Int64,
            "bool" => Self::Bool,
            "bytes" => Self::Bytes,
            "double" => Self::Double,
            _ => return None,
        })
    }

    /// The wire type a value of this scalar is written with.
    pub fn wire_type(self) -> u8 {
        match self {
            Self::String | Self::Bytes => 2,
            Self::Int32 | Self::Int64 | Self::Bool => 0,
            Self::Double => 1,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Type {
    Scalar(Scalar),
    Message(String),
}

impl Type {
    pub fn wire_type(&self) -> u8 {
        match self {
            Self::Scalar(scalar) => scalar.wire_type(),
            Self::Message(_) => 2,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    Optional,
    Repeated,
    /// A map with string keys; the field's type is the value's.
    Map,
    /// A message embedded in Go with `json:",inline"`: its fields are written in the parent's JSON object.
    Inline,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub number: u32,
    pub json: String,
    pub label: Label,
    pub kind: Type,
    /// A pointer in the Go type: present means set, even to a zero value.
    pub pointer: bool,
    /// Required in the schema (no `omitempty` in Go): a zero value is written in JSON.
    pub required: bool,
}

impl Field {
    /// The Go field name, as the Go decoder's errors print it.
    pub fn go_name(&self) -> String {
        let mut chars = self.json.chars();
        chars.next().map(|first| first.to_uppercase().chain(chars).collect()).unwrap_or_default()
    }
}

/// The messages whose JSON form is not an object of their fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special {
    /// `metav1.Time`: RFC 3339 to the second, `null` when zero.
    Time,
    /// `metav1.MicroTime`: RFC 3339 to the microsecond.
    MicroTime,
    /// `metav1.Duration`: Go's duration string.
    Duration,
    /// `runtime.RawExtension`, `metav1.FieldsV1`, `apiextensions.JSON`: JSON carried as bytes.
    RawJson,
    IntOrString,
    Quantity,
    /// `JSONSchemaPropsOrArray`: a schema or a list of them.
    SchemaOrArray,
    /// `JSONSchemaPropsOrBool`: a schema or a boolean.
    SchemaOrBool,
    /// `JSONSchemaPropsOrStringArray`: a schema or a list of strings.
    SchemaOrStringArray,
    /// `ExtraValue`: a list of strings, written as the list.
    StringList,
}

impl Special {
    pub const ALL: [(Self, &'static str); 10] = [
        (Self::Time, "time"),
        (Self::MicroTime, "microtime"),
        (Self::Duration, "duration"),
        (Self::RawJson, "rawjson"),
        (Self::IntOrString, "intorstring"),
        (Self::Quantity, "quantity"),
        (Self::SchemaOrArray, "schemaorarray"),
        (Self::SchemaOrBool, "schemaorbool"),
        (Self::SchemaOrStringArray, "schemaorstringarray"),
        (Self::StringList, "stringlist"),
    ];

    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(special, _)| *special == self).map(|(_, name)| *name).unwrap_or_default()
    }

    fn parse(text: &str) -> Option<Self> {
        Self::ALL.iter().find(|(_, name)| *name == text).map(|(special, _)| *special)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub id: String,
    pub special: Option<Special>,
    /// In field-number order, the order the wire form is written in.
    pub fields: Vec<Field>,
}

impl Message {
    pub fn field(&self, number: u32) -> Option<&Field> {
        self.fields.iter().find(|f| f.number == number)
    }

    /// The short name, for error messages.
    pub fn name(&self) -> &str {
        self.id.rsplit('.').next().unwrap_or(&self.id)
    }
}

#[derive(Debug, Default)]
pub struct Table {
    messages: HashMap<String, Message>,
    roots: HashMap<(String, String), String>,
}

impl Table {
    pub fn parse(text: &str) -> Result<Self, ProtobufError> {
        let bad = |line: &str| ProtobufError(format!("bad line in the message table: {line}"));
        let mut table = Self::default();
        for line in text.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
            let words: Vec<&str> = line.split(' ').collect();
            match words.as_slice() {
                ["root", api_version, kind, id] => {
                    table.roots.insert(((*api_version).to_owned(), (*kind).to_owned()), (*id).to_owned());
                }
                ["message", id, rest @ ..] => {
                    let (special, fields) = match rest.first().and_then(|w| w.strip_prefix('=')) {
                        Some(name) => (Some(Special::parse(name).ok_or_else(|| bad(line))?), &rest[1..]),
                        None => (None, rest),
                    };
                    let fields =
                        fields.iter().map(|f| parse_field(f).ok_or_else(|| bad(line))).collect::<Result<_, _>>()?;
                    table.messages.insert((*id).to_owned(), Message { id: (*id).to_owned(), special, fields });
                }
                _ => return Err(bad(line)),
            }
        }
        for message in table.messages.values() {
            for field in &message.fields {
                if let Type::Message(id) = &field.kind {
                    if !table.messages.contains_key(id) {
                        return Err(ProtobufError(format!(
                            "{}.{} refers to {id}, not in the table",
                            message.id, field.json
                        )));
                    }
                }
            }
        }
        Ok(table)
    }

    pub fn message(&self, id: &str) -> Option<&Message> {
        self.messages.get(id)
    }

    /// The message of an object's kind. `DeleteOptions` is registered in every group-version, as Kubernetes does.
    pub fn root(&self, api_version: &str, kind: &str) -> Option<&Message> {
        let id = match self.roots.get(&(api_version.to_owned(), kind.to_owned())) {
            Some(id) => id,
            None if kind == "DeleteOptions" => self.roots.get(&("v1".to_owned(), kind.to_owned()))?,
            None => return None,
        };
        self.messages.get(id)
    }
}

fn parse_field(text: &str) -> Option<Field> {
    let parts: Vec<&str> = text.split(',').collect();
    let (number, json, label, kind, flags) = match parts.as_slice() {
        [number, json, label, kind] => (number, json, label, kind, ""),
        [number, json, label, kind, flags] => (number, json, label, kind, *flags),
        _ => return None,
    };
    let label = match *label {
        "o" => Label::Optional,
        "r" => Label::Repeated,
        "m" => Label::Map,
        "i" => Label::Inline,
        _ => return None,
    };
    let kind = match Scalar::parse(kind) {
        Some(scalar) => Type::Scalar(scalar),
        None if kind.contains('.') => Type::Message((*kind).to_owned()),
        None => return None,
    };
    Some(Field {
        number: number.parse().ok()?,
        json: (*json).to_owned(),
        label,
        kind,
        pointer: flags.contains('p'),
        required: flags.contains('q'),
    })
}

/// The table of the messages served here, parsed once.
pub fn table() -> Result<&'static Table, ProtobufError> {
    static TABLE: OnceLock<Result<Table, ProtobufError>> = OnceLock::new();
    TABLE.get_or_init(|| Table::parse(include_str!("messages.txt"))).as_ref().map_err(Clone::clone)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_into_messages_and_roots() {
        let table = Table::parse(
            "# comment\nroot v1 ConfigMap a.ConfigMap\nmessage a.ConfigMap 1,metadata,o,a.Meta 2,data,m,string 4,immutable,o,bool,p\nmessage a.Meta 1,name,o,string,q\nmessage a.Time =time 1,seconds,o,int64\n",
        )
        .expect("parses");
        let config_map = table.root("v1", "ConfigMap").expect("root");
        assert_eq!(config_map.fields.len(), 3);
        assert_eq!(config_map.field(2).map(|f| f.label), Some(Label::Map));
        assert!(config_map.field(4).is_some_and(|f| f.pointer && !f.required));
        assert!(table.message("a.Meta").and_then(|m| m.field(1)).is_some_and(|f| f.required));
        assert_eq!(table.message("a.Time").and_then(|m| m.special), Some(Special::Time));
        assert!(table.root("v1", "Secret").is_none());
    }

    #[test]
    fn a_table_with_a_dangling_reference_or_a_bad_line_is_refused() {
        assert!(Table::parse("message a.X 1,y,o,a.Missing\n").is_err());
        assert!(Table::parse("message a.X 1,y,x,string\n").is_err());
        assert!(Table::parse("nonsense\n").is_err());
    }

    #[test]
    fn the_committed_table_parses() {
        let table = table().expect("the committed table parses");
        assert!(table.root("v1", "ConfigMap").is_some());
        assert!(table.root("apps/v1", "Deployment").is_some());
        assert!(table.root("apps/v1", "DeleteOptions").is_some());
    }
}
