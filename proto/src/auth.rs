//! Bearer-token authentication for every RPC: a server-side check in constant time and a
//! client-side interceptor that attaches the token. The token never appears in logs or errors.

use subtle::ConstantTimeEq;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::{Request, Status};

/// Checks `authorization: Bearer <token>` on incoming requests; with no token configured
/// every request passes.
#[derive(Clone)]
pub struct RequireToken {
    expected: Option<Vec<u8>>,
}

impl RequireToken {
    /// A check for `token` (`None`: authentication off).
    pub fn new(token: Option<&str>) -> Self {
        Self { expected: token.map(|t| format!("Bearer {t}").into_bytes()) }
    }
}

impl Interceptor for RequireToken {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let Some(expected) = &self.expected else { return Ok(request) };
        let given = request.metadata().get("authorization").map(|v| v.as_bytes()).unwrap_or_default();
        if bool::from(given.ct_eq(expected.as_slice())) {
            Ok(request)
        } else {
            Err(Status::unauthenticated("missing or wrong bearer token; set the same token on the coordinator and its clients"))
        }
    }
}

/// Attaches `authorization: Bearer <token>` to outgoing requests.
#[derive(Clone)]
pub struct AttachToken {
    header: Option<MetadataValue<Ascii>>,
}

impl AttachToken {
    /// An interceptor for `token` (`None`: send nothing). Fails if the token is not printable ASCII.
    pub fn new(token: Option<&str>) -> Result<Self, Status> {
        let header = token
            .map(|t| {
                format!("Bearer {t}")
                    .parse::<MetadataValue<Ascii>>()
                    .map_err(|_| Status::invalid_argument("the token must be printable ASCII"))
            })
            .transpose()?;
        Ok(Self { header })
    }
}

impl Interceptor for AttachToken {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(header) = &self.header {
            request.metadata_mut().insert("authorization", header.clone());
        }
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call_with(check: &mut RequireToken, token: Option<&str>) -> bool {
        let request = AttachToken::new(token).unwrap().call(Request::new(())).unwrap();
        check.call(request).is_ok()
    }

    #[test]
    fn only_the_configured_token_passes() {
        let mut check = RequireToken::new(Some("s3cret"));
        assert!(call_with(&mut check, Some("s3cret")));
        assert!(!call_with(&mut check, Some("s3cre")));
        assert!(!call_with(&mut check, None));
        let mut open = RequireToken::new(None);
        assert!(call_with(&mut open, None));
        let err = check.call(Request::new(())).unwrap_err();
        assert!(!err.message().contains("s3cret"));
    }
}
