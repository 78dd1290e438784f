//! Entry-point attribute macros for [coro](https://docs.rs/coro): `#[coro::main]`,
//! `#[coro::test]` and `#[coro::task]`; and `coro::select!`.
//!
//! Use them through the `coro` crate, which re-exports them; the expansions refer to `::coro`.

#![deny(missing_docs)]

mod select;

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{quote, quote_spanned};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Error, Expr, FnArg, ItemFn, Lit, Meta, ReturnType, Token, Type};

/// Options shared by `main` and `test`.
#[derive(Default)]
struct Options {
    worker_threads: Option<Expr>,
    timeout_ms: Option<Expr>,
    /// `test` only: run as a deterministic simulation (`sim`), with `seed = N` or
    /// `seeds = a..b`.
    sim: bool,
    seed: Option<Expr>,
    seeds: Option<Expr>,
}

fn parse_options(args: TokenStream, allowed: &[&str], macro_name: &str) -> Result<Options, Error> {
    let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse(args)?;
    let mut options = Options::default();
    for meta in metas {
        if let Meta::Path(path) = &meta {
            if path.is_ident("sim") && allowed.contains(&"sim") {
                if options.sim {
                    return Err(Error::new(path.span(), "option `sim` is given twice"));
                }
                options.sim = true;
                continue;
            }
        }
        let Meta::NameValue(nv) = &meta else {
            return Err(Error::new(
                meta.span(),
                format!(
                    "#[coro::{macro_name}] options are `name = value`; supported: {}",
                    allowed.join(", ")
                ),
            ));
        };
        let name = nv
            .path
            .get_ident()
            .map(|i| i.to_string())
            .unwrap_or_default();
        if !allowed.contains(&name.as_str()) {
            return Err(Error::new(
                nv.path.span(),
                format!(
                    "unknown option `{name}` for #[coro::{macro_name}]; supported: {}",
                    allowed.join(", ")
                ),
            ));
        }
        let may_be_zero = name == "seed";
        if let Expr::Lit(lit) = &nv.value {
            if let Lit::Int(int) = &lit.lit {
                if int.base10_parse::<u64>()? == 0 && !may_be_zero {
                    return Err(Error::new(
                        int.span(),
                        format!("`{name}` must be at least 1"),
                    ));
                }
            }
        }
        let slot = match name.as_str() {
            "worker_threads" => &mut options.worker_threads,
            "seed" => &mut options.seed,
            "seeds" => &mut options.seeds,
            _ => &mut options.timeout_ms,
        };
        if slot.is_some() {
            return Err(Error::new(
                nv.path.span(),
                format!("option `{name}` is given twice"),
            ));
        }
        *slot = Some(nv.value.clone());
    }
    Ok(options)
}

fn require_async(func: &ItemFn, macro_name: &str) -> Result<(), Error> {
    if func.sig.asyncness.is_none() {
        return Err(Error::new(
            func.sig.fn_token.span(),
            format!(
                "#[coro::{macro_name}] needs an `async fn`: add `async` before `fn {}`",
                func.sig.ident
            ),
        ));
    }
    Ok(())
}

fn require_no_args(func: &ItemFn, macro_name: &str) -> Result<(), Error> {
    if let Some(arg) = func.sig.inputs.first() {
        return Err(Error::new(
            arg.span(),
            format!("#[coro::{macro_name}] functions take no arguments"),
        ));
    }
    Ok(())
}

/// The body of `main`/`test`: build a pool, install the panic hook, run the async body there.
fn pool_runner(func: &ItemFn, options: &Options, timeout: Option<&Expr>) -> TokenStream2 {
    let body = &func.block;
    let name = func.sig.ident.to_string();
    let output = match &func.sig.output {
        ReturnType::Default => quote!(()),
        ReturnType::Type(_, ty) => quote!(#ty),
    };
    let workers = match &options.worker_threads {
        Some(n) => quote!(.worker_threads(#n)),
        None => quote!(),
    };
    let run = match timeout {
        Some(ms) => quote! {
            ::coro::__private::block_wait_timeout(__task, #ms, __pool)
        },
        None => quote!(::coro::block_wait(__task)),
    };
    quote! {
        let __pool = ::coro::ThreadPool::builder()
            #workers
            .build()
            .unwrap_or_else(|e| panic!("#[coro] could not build its thread pool: {e}"));
        ::coro::trace::install_panic_hook();
        let __task = ::coro::Task::<#output>::new(async move #body).named(#name).schedule_on(&__pool);
        #run
    }
}

/// Runs an `async fn main` on a fresh [`ThreadPool`](https://docs.rs/coro) (one worker per core,
/// or `worker_threads = N`), with coro's panic hook installed, via `block_wait`.
///
/// ```ignore
/// #[coro::main(worker_threads = 2)]
/// async fn main() {
///     let answer = coro::spawn(async { 42 }).await.unwrap();
///     println!("{answer}");
/// }
/// ```
#[proc_macro_attribute]
pub fn main(args: TokenStream, item: TokenStream) -> TokenStream {
    expand_main(args, item, |args, func| {
        let options = parse_options(args, &["worker_threads"], "main")?;
        require_async(&func, "main")?;
        require_no_args(&func, "main")?;
        let runner = pool_runner(&func, &options, None);
        let (attrs, vis, mut sig) = (&func.attrs, &func.vis, func.sig.clone());
        sig.asyncness = None;
        Ok(quote! { #(#attrs)* #vis #sig { #runner } })
    })
}

/// The body of a `sim` test: the async body as a `coro::sim` simulation, with a random seed
/// (or `CORO_SIM_SEED`), the seed given, or each seed of a range.
fn sim_runner(func: &ItemFn, options: &Options) -> Result<TokenStream2, Error> {
    let body = &func.block;
    if let Some(timeout) = &options.timeout_ms {
        return Err(Error::new(
            timeout.span(),
            "`timeout_ms` does not apply to a `sim` test: it runs in virtual time and stops by \
             itself on a deadlock or livelock",
        ));
    }
    if let (Some(_), Some(seeds)) = (&options.seed, &options.seeds) {
        return Err(Error::new(
            seeds.span(),
            "give either `seed = N` or `seeds = a..b`, not both",
        ));
    }
    let workers = match &options.worker_threads {
        Some(n) => quote!(.workers(#n)),
        None => quote!(),
    };
    if let Some(seeds) = &options.seeds {
        if let Some(workers) = &options.worker_threads {
            return Err(Error::new(
                workers.span(),
                "`worker_threads` with `seeds`: run_seeds uses 2 logical workers; loop over \
                 coro::sim::Builder::new().seed(s).workers(n) for another count",
            ));
        }
        return Ok(quote! {
            ::coro::trace::install_panic_hook();
            ::coro::sim::run_seeds(#seeds, || async move #body)
        });
    }
    let seed = match &options.seed {
        Some(seed) => quote!(.seed(#seed)),
        None => quote!(),
    };
    Ok(quote! {
        ::coro::trace::install_panic_hook();
        ::coro::sim::Builder::new() #seed #workers .run_with(|| async move #body)
    })
}

/// Runs an `async fn` test on a fresh thread pool per test (options `worker_threads = N`,
/// `timeout_ms = N`: past it the test panics with "test timed out after N ms"). Composes with
/// `#[should_panic]` and `#[ignore]`.
///
/// With `sim`, the test runs as a deterministic `coro::sim` simulation instead: with a random
/// seed (printed; `CORO_SIM_SEED` overrides it), `seed = N`, or once per seed of
/// `seeds = a..b`; `worker_threads = N` sets the logical workers.
///
/// ```ignore
/// #[coro::test(timeout_ms = 1000)]
/// async fn adds() {
///     assert_eq!(coro::spawn(async { 1 + 1 }).await.unwrap(), 2);
/// }
///
/// #[coro::test(sim, seeds = 0..100)]
/// async fn adds_under_a_hundred_schedules() {
///     assert_eq!(coro::spawn(async { 1 + 1 }).await.unwrap(), 2);
/// }
/// ```
#[proc_macro_attribute]
pub fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(args, item, |args, func| {
        let options = parse_options(
            args,
            &["worker_threads", "timeout_ms", "sim", "seed", "seeds"],
            "test",
        )?;
        require_async(&func, "test")?;
        require_no_args(&func, "test")?;
        if !options.sim {
            if let Some(seed) = options.seed.as_ref().or(options.seeds.as_ref()) {
                return Err(Error::new(
                    seed.span(),
                    "`seed`/`seeds` apply to simulated tests: write #[coro::test(sim, ...)]",
                ));
            }
        }
        let runner = if options.sim {
            sim_runner(&func, &options)?
        } else {
            pool_runner(&func, &options, options.timeout_ms.as_ref())
        };
        let (attrs, vis, mut sig) = (&func.attrs, &func.vis, func.sig.clone());
        sig.asyncness = None;
        Ok(quote! { #[::core::prelude::v1::test] #(#attrs)* #vis #sig { #runner } })
    })
}

/// Turns `async fn f(args) -> T` into `fn f(args) -> coro::Task<T>`: a lazy task named `f`,
/// created where `f` is called, with the arguments captured by value at the call.
///
/// ```ignore
/// #[coro::task]
/// async fn add(a: u32, b: u32) -> u32 {
///     a + b
/// }
///
/// let task: coro::Task<u32> = add(1, 2); // nothing has run yet
/// assert_eq!(coro::block_wait(task), 3);
/// ```
#[proc_macro_attribute]
pub fn task(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(args, item, |args, func| {
        if !args.is_empty() {
            return Err(Error::new(
                Span::call_site(),
                "#[coro::task] takes no options",
            ));
        }
        require_async(&func, "task")?;
        for arg in &func.sig.inputs {
            match arg {
                FnArg::Receiver(r) if r.reference.is_some() => {
                    return Err(Error::new(
                        r.span(),
                        "#[coro::task] makes a 'static Task, which cannot borrow `self`: take `self` \
                         by value (e.g. `self: Arc<Self>`)",
                    ));
                }
                FnArg::Typed(pat) if borrows_non_static(&pat.ty) => {
                    return Err(Error::new(
                        pat.ty.span(),
                        "#[coro::task] makes a 'static Task, which cannot hold a borrowed argument: \
                         pass it by value (clone it, or share it with Arc)",
                    ));
                }
                _ => {}
            }
        }
        if !func.sig.generics.params.is_empty() {
            if let Some(lt) = func.sig.generics.lifetimes().next() {
                return Err(Error::new(
                    lt.span(),
                    "#[coro::task] makes a 'static Task: lifetime parameters cannot be captured",
                ));
            }
        }
        let (attrs, vis, body) = (&func.attrs, &func.vis, &func.block);
        let name = func.sig.ident.to_string();
        let mut sig = func.sig.clone();
        sig.asyncness = None;
        let output = match &func.sig.output {
            ReturnType::Default => quote!(()),
            ReturnType::Type(_, ty) => quote!(#ty),
        };
        sig.output = syn::parse2(quote_spanned!(output.span()=> -> ::coro::Task<#output>))?;
        Ok(quote! {
            #(#attrs)*
            #[track_caller]
            #vis #sig {
                ::coro::Task::new(async move #body).named(#name)
            }
        })
    })
}

/// Runs `f`; on error, emits the error next to a harmless stand-in so the one message that names
/// the problem is not buried under follow-on errors (for `main`: an empty `fn main`, whose
/// absence or asyncness would be reported too; otherwise the item as written).
/// Whether an argument type is a reference that is not `&'static`.
fn borrows_non_static(ty: &Type) -> bool {
    match ty {
        Type::Reference(r) => r.lifetime.as_ref().is_none_or(|lt| lt.ident != "static"),
        _ => false,
    }
}

fn expand(
    args: TokenStream,
    item: TokenStream,
    f: impl FnOnce(TokenStream, ItemFn) -> Result<TokenStream2, Error>,
) -> TokenStream {
    expand_with(args, item, false, f)
}

fn expand_main(
    args: TokenStream,
    item: TokenStream,
    f: impl FnOnce(TokenStream, ItemFn) -> Result<TokenStream2, Error>,
) -> TokenStream {
    expand_with(args, item, true, f)
}

fn expand_with(
    args: TokenStream,
    item: TokenStream,
    is_main: bool,
    f: impl FnOnce(TokenStream, ItemFn) -> Result<TokenStream2, Error>,
) -> TokenStream {
    let func = match syn::parse::<ItemFn>(item.clone()) {
        Ok(func) => func,
        Err(e) => {
            let mut out = TokenStream2::from(item);
            out.extend(
                Error::new(
                    e.span(),
                    format!("coro's attribute macros apply to functions: {e}"),
                )
                .to_compile_error(),
            );
            return out.into();
        }
    };
    match f(args, func) {
        Ok(tokens) => tokens.into(),
        Err(e) => {
            let mut out = if is_main {
                quote!(
                    fn main() {}
                )
            } else {
                TokenStream2::from(item)
            };
            out.extend(e.to_compile_error());
            out.into()
        }
    }
}

/// The procedural macro behind `coro::select!` (documented with examples in the `coro` crate,
/// which re-exports it; the expansion refers to `::coro`). It expands to a block that pins each
/// future on the stack, polls them in one `core::future::poll_fn`, drops them all, then matches
/// the winner's output against its pattern to run its body; malformed input is a compile error
/// at the offending tokens.
#[proc_macro]
pub fn select(input: TokenStream) -> TokenStream {
    select::select(input.into()).into()
}
