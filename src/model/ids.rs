//! Identifier newtypes: one type per kind of id, so a site id cannot be passed where a link id
//! is expected, nor a hold id where a transaction id is.
//!
//! Text ids ([`SiteId`], [`LinkId`], [`NodeId`]) wrap a `String`; on the wire and in the
//! store they are that string (serde `transparent`). They dereference to `str`, borrow as
//! `str` (so a `HashMap<SiteId, _>` is looked up with a `&str`) and compare with strings.
//! Their text is checked where a grid is built ([`crate::model::Grid::new`]), not here: an id
//! that names nothing is answered "unknown site" by whoever looks it up.
//!
//! Uuid ids (the protocol's `HoldId`, `TxnId`) are made by [`uuid_id!`]: `Copy`, a random v4
//! from `new()`, and the uuid's text on the wire.

/// Declares a text identifier newtype `$name(String)` with its conversions (see the module
/// documentation).
macro_rules! text_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord,
            serde::Serialize, serde::Deserialize, utoipa::ToSchema,
        )]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// The id's text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The id's text, owned.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                $name(s)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                $name(s.to_owned())
            }
        }

        impl From<&String> for $name {
            fn from(s: &String) -> Self {
                $name(s.clone())
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl std::str::FromStr for $name {
            type Err = std::convert::Infallible;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Ok(s.into())
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        impl PartialEq<$name> for str {
            fn eq(&self, other: &$name) -> bool {
                self == other.0
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }
    };
}

/// Declares a uuid identifier newtype `$name(Uuid)` (see the module documentation).
macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord,
            serde::Serialize, serde::Deserialize, utoipa::ToSchema,
        )]
        #[serde(transparent)]
        pub struct $name(uuid::Uuid);

        impl $name {
            /// A new random (v4) id.
            #[allow(clippy::new_without_default)]
            pub fn new() -> Self {
                $name(uuid::Uuid::new_v4())
            }

            /// The all-zero id (tests, placeholders).
            pub const fn nil() -> Self {
                $name(uuid::Uuid::nil())
            }

            /// The greatest id (an upper bound for ranges of ids).
            pub const fn max() -> Self {
                $name(uuid::Uuid::max())
            }

            /// The uuid (the store's column value).
            pub const fn as_uuid(&self) -> uuid::Uuid {
                self.0
            }
        }

        impl From<uuid::Uuid> for $name {
            fn from(u: uuid::Uuid) -> Self {
                $name(u)
            }
        }

        impl From<$name> for uuid::Uuid {
            fn from(id: $name) -> uuid::Uuid {
                id.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }

        impl std::str::FromStr for $name {
            type Err = uuid::Error;
            fn from_str(s: &str) -> Result<Self, uuid::Error> {
                s.parse().map($name)
            }
        }
    };
}

pub(crate) use uuid_id;

text_id! {
    /// Identifier of a topology node (a router / switch / PoP).
    NodeId
}

text_id! {
    /// Identifier of a link between two nodes.
    LinkId
}

text_id! {
    /// Identifier of a compute resource (site).
    SiteId
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn text_ids_are_their_string_on_the_wire_and_in_maps() {
        let id = SiteId::from("s1");
        assert_eq!(serde_json::to_string(&id).unwrap(), r#""s1""#);
        assert_eq!(serde_json::from_str::<SiteId>(r#""s1""#).unwrap(), id);
        let m: HashMap<SiteId, u32> = [(id.clone(), 4)].into();
        assert_eq!(m.get("s1"), Some(&4));
        assert_eq!(id, "s1");
        assert!("s1" == id);
        assert_eq!(id.len(), 2);
    }

    uuid_id! {
        /// A test id.
        TestId
    }

    #[test]
    fn uuid_ids_are_their_uuid_on_the_wire() {
        let id = TestId::new();
        assert_eq!(serde_json::to_string(&id).unwrap(), format!("\"{}\"", id.as_uuid()));
        assert_eq!(id.to_string().parse::<TestId>().unwrap(), id);
        assert_ne!(id, TestId::nil());
    }
}
