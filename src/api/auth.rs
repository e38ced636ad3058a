//! Bearer API tokens.
//!
//! A token is `cs_` + 64 hex digits (256 random bits); the store keeps only its SHA-256, so a
//! leaked store leaks no usable token. Roles: a **user** sees and cancels only their own plans;
//! a **service** token (a planner or another broker) may also drive holds directly; an
//! **admin** may do everything (grid changes, everyone's plans, new tokens).

use rand::RngCore;
use sha2::{Digest, Sha256};

use super::problem::ApiError;
use crate::store::{Store, StoreError, TokenRecord};

/// A fresh random token.
pub fn generate_token() -> String {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    format!("cs_{}", hex::encode(bytes))
}

/// Hex SHA-256 of a token: the only form the store keeps.
pub fn hash_token(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// The deployment-wide planner principal: the owner of every hold a planner credential
/// (a token with the `planner` role) prepares. Every planner credential may drive such holds,
/// so that any planner of the deployment finishes any in-doubt transaction (docs/protocol.md,
/// "Identity"). No token can be issued for this name.
pub const PLANNERS: &str = "@planners";

/// The principal of the bootstrap `--admin-token`.
pub const ADMIN_PRINCIPAL: &str = "admin";
/// The principal of the bootstrap `--service-token`.
pub const SERVICE_PRINCIPAL: &str = "service";

/// Principal names no issued token may take (`POST /v1/tokens`, `coreserve token create`): the
/// bootstrap tokens' principals and the planner principal. Compared without regard to case.
pub const RESERVED_NAMES: &[&str] = &[ADMIN_PRINCIPAL, SERVICE_PRINCIPAL, PLANNERS, "root", "system"];

/// Why a principal name was refused ([`check_principal_name`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrincipalNameError {
    /// Empty, too long or with control characters.
    #[error("user {0}")]
    BadText(crate::model::TextError),
    /// Leading or trailing whitespace (refused, never trimmed).
    #[error("user `{0}` has leading or trailing whitespace")]
    Padded(String),
    /// A character that shows as nothing (`invisible`), by code point.
    #[error("user {user:?} contains the invisible character U+{code_point:04X} (a name must look like what it is)")]
    Invisible { user: String, code_point: u32 },
    /// A reserved name, or one starting with `@`.
    #[error("user `{0}` is reserved (bootstrap and deployment principals: {names}, and every name starting with @)", names = RESERVED_NAMES.join(", "))]
    Reserved(String),
}

/// Checks a principal name for a token to be issued: 1-128 characters, no control characters,
/// no leading or trailing whitespace (refused, never trimmed: `" admin"` is not `admin`), not
/// starting with `@` and not a reserved name ([`RESERVED_NAMES`]).
///
/// # Errors
/// The [`PrincipalNameError`], for a 422 or the CLI.
pub fn check_principal_name(user: &str) -> Result<(), PrincipalNameError> {
    crate::model::check_text(user).map_err(PrincipalNameError::BadText)?;
    if user.trim() != user {
        return Err(PrincipalNameError::Padded(user.to_owned()));
    }
    if let Some(c) = user.chars().find(|c| invisible(*c)) {
        return Err(PrincipalNameError::Invisible { user: user.to_owned(), code_point: u32::from(c) });
    }
    if user.starts_with('@') || RESERVED_NAMES.iter().any(|r| r.eq_ignore_ascii_case(user)) {
        return Err(PrincipalNameError::Reserved(user.to_owned()));
    }
    Ok(())
}

/// Characters that show as nothing (or reorder what follows): a name with one would be shown
/// like another (`admin\u{200B}` as `admin`). Zero-width and joining characters, soft hyphen,
/// bidirectional controls, word joiners, the byte-order mark, tags.
fn invisible(c: char) -> bool {
    matches!(u32::from(c),
        0x00AD | 0x034F | 0x061C | 0x115F | 0x1160 | 0x17B4 | 0x17B5 | 0x180B..=0x180F | 0x200B..=0x200F
        | 0x202A..=0x202E | 0x2060..=0x206F | 0x3164 | 0xFE00..=0xFE0F | 0xFEFF | 0xFFA0 | 0xFFF9..=0xFFFB
        | 0xE0000..=0xE0FFF)
}

/// The roles of a token to store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Roles {
    pub admin: bool,
    pub service: bool,
    /// A planner of this deployment (implies service).
    pub planner: bool,
}

/// Stores a token for `user` with the given roles (the bootstrap tokens; see
/// [`register_token_with`]).
pub async fn register_token(
    store: &dyn Store,
    token: &str,
    user: &str,
    admin: bool,
    service: bool,
) -> Result<(), StoreError> {
    register_token_with(store, token, user, Roles { admin, service, planner: false }, None).await.map(|_| ())
}

/// Stores a token for `user` with `roles`, valid until `expires_at`; returns its record.
pub async fn register_token_with(
    store: &dyn Store,
    token: &str,
    user: &str,
    roles: Roles,
    expires_at: Option<chrono::DateTime<chrono::Utc>>,
) -> Result<TokenRecord, StoreError> {
    let mut rec = TokenRecord::new(hash_token(token), user, roles.admin, roles.service || roles.planner);
    rec.planner = roles.planner;
    rec.expires_at = expires_at;
    store.insert_token(rec.clone()).await?;
    // The stored id (a hash stored before keeps its own).
    Ok(store.token(&rec.hash).await?.unwrap_or(rec))
}

/// Generates a token for `user`, stores its hash and returns the token (the only time it is
/// seen in clear). Behind `coreserve token create`.
pub async fn create_token(store: &dyn Store, user: &str, admin: bool, service: bool) -> Result<String, StoreError> {
    let token = generate_token();
    register_token(store, &token, user, admin, service).await?;
    Ok(token)
}

/// The token of an `Authorization` header value `Bearer <token>`: the scheme name is
/// case-insensitive (RFC 9110 section 11.1), surrounding whitespace is ignored; `None` for
/// another scheme or an empty token.
pub fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The principal id of a verified client certificate named `name`: derived from the name in a
/// space of its own (SHA-256 of a fixed prefix and the name), so that it is stable across
/// processes and restarts and is never the id of a token's principal (those are random,
/// `principals.id`): a certificate named `admin` or `alice` owns nothing of the admin's or
/// alice's.
pub fn certificate_principal(name: &str) -> uuid::Uuid {
    let digest = Sha256::digest(format!("coreserve client certificate\0{name}").as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

/// The authenticated caller of a request: extract it in a handler to require a valid token
/// (401 without one).
#[derive(Debug, Clone)]
pub struct Caller {
    /// The principal's name, as shown (the `user` of plans, `whoami`, the audit log). Never
    /// what access is decided on: that is [`Caller::principal`].
    pub user: String,
    /// The principal's id: what owns plans and idempotency keys.
    pub principal: uuid::Uuid,
    /// Authenticated by a verified client certificate (not a token): its principal is
    /// [`certificate_principal`] of its name.
    pub certified: bool,
    pub admin: bool,
    pub service: bool,
    /// A planner of this deployment: its holds belong to [`PLANNERS`].
    pub planner: bool,
    /// The token's id (`None` for callers made up in process).
    pub token_id: Option<uuid::Uuid>,
}

impl Caller {
    /// The planner principal `name` of a verified client certificate (see [`super::peer`]): a
    /// planner of this deployment, never an admin.
    pub fn certified(name: &str) -> Caller {
        Caller {
            user: name.to_owned(),
            principal: certificate_principal(name),
            certified: true,
            admin: false,
            service: true,
            planner: true,
            token_id: None,
        }
    }

    /// 403 unless admin.
    pub fn require_admin(&self) -> Result<(), ApiError> {
        if self.admin {
            Ok(())
        } else {
            Err(ApiError::forbidden("this operation needs an admin token"))
        }
    }

    /// 403 unless service or admin.
    pub fn require_service(&self) -> Result<(), ApiError> {
        if self.admin || self.service {
            Ok(())
        } else {
            Err(ApiError::forbidden("hold operations need a service or admin token"))
        }
    }

    /// May this caller see and cancel a plan owned by principal `owner`? Its own principal's
    /// plans, or every plan for an admin; never by name (a token for another principal shown
    /// alike, or a certificate of the same name, sees nothing).
    pub fn may_access(&self, owner: uuid::Uuid) -> bool {
        self.admin || self.principal == owner
    }

    /// The principal the holds this caller prepares belong to: [`PLANNERS`] for a planner
    /// credential, else its user.
    pub fn hold_principal(&self) -> &str {
        if self.planner {
            PLANNERS
        } else {
            &self.user
        }
    }

    /// Does a hold owned by `owner` belong to this caller (its own principal, or the planner
    /// principal for a planner credential)? Holds record their owner's name: a token
    /// principal's name is its alone (`principals.name` is unique), and a certified caller
    /// owns only the planners' holds (the holds it prepares are theirs), never those of a
    /// token principal whose name its certificate bears.
    pub fn owns_hold(&self, owner: &str) -> bool {
        (!self.certified && owner == self.user) || (self.planner && owner == PLANNERS)
    }
}

#[cfg(test)]
mod tests {
    use super::{bearer_token, check_principal_name};
    use crate::api::config::check_configured_token;

    #[test]
    fn principal_names_are_validated_not_trimmed_and_reserved_names_refused() {
        assert_eq!(check_principal_name("alice"), Ok(()));
        assert_eq!(check_principal_name("planner-1"), Ok(()));
        for bad in [
            "admin",
            "Admin",
            " admin",
            "admin ",
            "\u{3000}admin",
            "admin\u{200B}",
            "ad\u{202E}nimda",
            "\u{FEFF}alice",
            "service",
            "@planners",
            "@x",
            "",
            " ",
            "a\tb",
            "alice\n",
        ] {
            assert!(check_principal_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_configured_token_has_a_minimum_length() {
        assert!(check_configured_token("--admin-token", "x").unwrap_err().to_string().contains("at least 16"));
        assert!(check_configured_token("--admin-token", "0123456789abcde").is_err());
        assert_eq!(check_configured_token("--admin-token", "0123456789abcdef"), Ok(()));
        assert!(check_configured_token("--admin-token", "0123456789 abcdef").is_err());
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer abc"), Some("abc"));
        assert_eq!(bearer_token("BEARER  abc "), Some("abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("Bearer"), None);
    }
}
