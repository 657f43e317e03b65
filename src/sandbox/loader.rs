//! The module loader: the model's own module is loaded from memory; of imports, only the
//! provider SDK and the entry guard (`sdkbox:entry`, see `entry.rs`) resolve. Nothing is
//! ever read from disk or the network.

use deno_core::error::ModuleLoaderError;
use deno_core::{
    ModuleLoadOptions, ModuleLoadReferrer, ModuleLoadResponse, ModuleLoader, ModuleResolveResponse,
    ModuleSource, ModuleSourceCode, ModuleSpecifier, ModuleType, ResolutionKind,
};
use deno_error::JsErrorBox;

use super::entry::{GUARD_MODULE, GUARD_URL};
use super::source::MODULE_URL;

/// The specifier the provider SDK is imported by.
const SDK_SPECIFIER: &str = "sdkbox:sdk";

/// Names accepted for the SDK in `import { api } from "..."`.
const SDK_NAMES: &[&str] = &["sdkbox", "sdkbox:sdk", "@sdkbox/sdk"];

const SDK_MODULE: &str = "export const api = globalThis.api; export default api;";

/// Refuses every import but the provider SDK, with a message that says what is in scope.
pub struct SandboxLoader;

fn refused(specifier: &str) -> ModuleLoaderError {
    JsErrorBox::generic(format!(
        "cannot import `{specifier}`: the sandbox loads no modules from files or the network; \
         `api`, `fetch` and `console` are already in scope (or `import {{ api }} from \"sdkbox\"`)"
    ))
}

impl ModuleLoader for SandboxLoader {
    fn resolve(
        &self,
        specifier: &str,
        referrer: &str,
        kind: ResolutionKind,
    ) -> ModuleResolveResponse {
        if specifier == MODULE_URL && referrer == MODULE_URL {
            // Its own namespace would reach its guarded entry in ways the static rule does
            // not see: the harness alone imports the model's module.
            Err(JsErrorBox::generic(
                "a script cannot import itself: call its functions by name",
            ))
        } else if specifier == MODULE_URL {
            // The model's own module, whose code deno_core already holds.
            ModuleSpecifier::parse(MODULE_URL).map_err(JsErrorBox::from_err)
        } else if SDK_NAMES.contains(&specifier) {
            ModuleSpecifier::parse(SDK_SPECIFIER).map_err(JsErrorBox::from_err)
        } else if specifier == GUARD_URL
            && referrer == MODULE_URL
            && matches!(kind, ResolutionKind::DynamicImport)
        {
            // The model's compiled module imports the guard statically; the model itself
            // may not reach it (see `source::own_modules_only`).
            Err(JsErrorBox::generic(format!(
                "`{GUARD_URL}` is sdkbox's own module: a script cannot import it"
            )))
        } else if specifier == GUARD_URL {
            ModuleSpecifier::parse(GUARD_URL).map_err(JsErrorBox::from_err)
        } else {
            Err(refused(specifier))
        }
    }

    fn load(
        &self,
        specifier: &ModuleSpecifier,
        _referrer: Option<&ModuleLoadReferrer>,
        _options: ModuleLoadOptions,
    ) -> ModuleLoadResponse {
        let source = match specifier.as_str() {
            SDK_SPECIFIER => SDK_MODULE,
            GUARD_URL => GUARD_MODULE,
            other => return ModuleLoadResponse::Sync(Err(refused(other))),
        };
        ModuleLoadResponse::Sync(Ok(ModuleSource::new(
            ModuleType::JavaScript,
            ModuleSourceCode::String(source.to_owned().into()),
            specifier,
            None,
        )))
    }
}
