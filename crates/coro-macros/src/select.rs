//! `coro::select!`: wait on several futures, take the first ready branch, drop the others.
//!
//! The input is parsed into [`Select`], then expanded to (for two branches, no `default`/`else`):
//!
//! ```text
//! {
//!     enum __CoroSelectOutput<T0, T1> { Branch0(T0), Branch1(T1) }
//!     let __output = {
//!         // Futures in written order; a false precondition leaves its branch `None`, unevaluated.
//!         let mut __fut0 = pin!(Some(IntoFuture::into_future(fut_a)));
//!         let mut __fut1 = pin!({ let c: bool = cond; if c { Some(..(fut_b)) } else { None } });
//!         poll_fn(|cx| {
//!             // From a random branch (`biased;`: from the first), poll each enabled branch once;
//!             // the first ready one whose output matches its pattern wins; a refuted one is
//!             // dropped (`None`: disabled) and the round goes on.
//!             ..
//!         }).await
//!     }; // every future, loser or winner, is dropped here: before any body runs
//!     match __output {
//!         __CoroSelectOutput::Branch0(pat_a) => body_a,
//!         __CoroSelectOutput::Branch1(pat_b) => body_b,
//!     }
//! }
//! ```
//!
//! Bodies run outside the polling closure, so `return`, `?`, `break`/`continue` and `.await`
//! in them act on the code around the select. Futures are pinned on the stack (`core::pin::pin!`,
//! no allocation, no `unsafe`). Internal names use mixed-site hygiene, invisible to user code.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::{Error, Expr, ExprBlock, Ident, Lit, Pat, PatReference, Token, token};

/// A parsed `select!` invocation.
struct Select {
    biased: bool,
    branches: Vec<Branch>,
    default: Option<Expr>,
    else_: Option<Expr>,
}

/// `pattern = future [, if precondition] => body`.
struct Branch {
    pat: Pat,
    fut: Expr,
    cond: Option<Expr>,
    body: Expr,
}

const BRANCH_SHAPE: &str = "each branch is `pattern = future => body` \
                            (or `pattern = future, if precondition => body`)";

/// Whether the next tokens are the identifier `word` (not a keyword, so not a `Token!`).
fn peek_word(input: ParseStream, word: &str) -> bool {
    input
        .cursor()
        .ident()
        .is_some_and(|(ident, _)| ident == word)
}

/// Whether the identifier `word` is next and is followed by a token that `peek` accepts.
fn peek_word_then(input: ParseStream, word: &str, peek: impl FnOnce(ParseStream) -> bool) -> bool {
    if !peek_word(input, word) {
        return false;
    }
    let fork = input.fork();
    let _ = fork.parse::<Ident>();
    peek(&fork)
}

/// The span to blame for what comes next: the next token, or `fallback` at the end of input.
fn next_span(input: ParseStream, fallback: Span) -> Span {
    if input.is_empty() {
        fallback
    } else {
        input.span()
    }
}

impl Parse for Select {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut select = Select {
            biased: false,
            branches: Vec::new(),
            default: None,
            else_: None,
        };
        // `biased;` comes first. `biased = fut => ..` (a binding named `biased`) is a branch.
        if peek_word(input, "biased")
            && !peek_word_then(input, "biased", |rest| {
                rest.peek(Token![=]) && !rest.peek(Token![=>])
                    || rest.peek(Token![@])
                    || rest.peek(Token![|])
            })
        {
            let biased: Ident = input.parse()?;
            if !input.peek(Token![;]) {
                return Err(Error::new(
                    biased.span(),
                    "`biased` must be followed by `;`: \
                     `coro::select! { biased; a = f1 => .., b = f2 => .. }`",
                ));
            }
            input.parse::<Token![;]>()?;
            select.biased = true;
        }
        while !input.is_empty() {
            if peek_word_then(input, "biased", |rest| rest.peek(Token![;])) {
                return Err(Error::new(
                    input.span(),
                    "`biased;` goes before the first branch: \
                     `coro::select! { biased; a = f1 => .., b = f2 => .. }`",
                ));
            }
            if input.peek(Token![else]) {
                let kw: Token![else] = input.parse()?;
                if !input.peek(Token![=>]) {
                    return Err(Error::new(
                        next_span(input, kw.span),
                        "`else` takes no pattern, future or precondition: write `else => body` \
                         (it runs when every branch is disabled)",
                    ));
                }
                input.parse::<Token![=>]>()?;
                let body = parse_body(input)?;
                if select.else_.is_some() {
                    return Err(Error::new(
                        kw.span,
                        "a second `else` branch: a select has at most one",
                    ));
                }
                select.else_ = Some(body);
                continue;
            }
            if peek_word(input, "default") {
                let kw: Ident = input.parse()?;
                if !input.peek(Token![=>]) {
                    // Blame `default` and the token after it (the would-be pattern or future).
                    let mut blamed = kw.to_token_stream();
                    blamed.extend(input.fork().parse::<proc_macro2::TokenTree>());
                    return Err(Error::new_spanned(
                        blamed,
                        "`default` takes no pattern, future or precondition: write \
                         `default => body` (it runs when no branch is ready on the first poll)",
                    ));
                }
                input.parse::<Token![=>]>()?;
                let body = parse_body(input)?;
                if select.default.is_some() {
                    return Err(Error::new(
                        kw.span(),
                        "a second `default` branch: a select has at most one",
                    ));
                }
                select.default = Some(body);
                continue;
            }
            select.branches.push(parse_branch(input)?);
        }
        if select.branches.is_empty() {
            return Err(Error::new(
                Span::call_site(),
                "coro::select! needs at least one branch that waits on a future: \
                 `coro::select! { v = future => body, .. }`",
            ));
        }
        Ok(select)
    }
}

fn parse_branch(input: ParseStream) -> syn::Result<Branch> {
    let pat = Pat::parse_multi_with_leading_vert(input)?;
    if input.peek(Token![=>]) {
        return Err(Error::new(
            pat.span(),
            format!(
                "this branch has no future: {BRANCH_SHAPE}; write `_ = future => ..` to ignore \
                 the output"
            ),
        ));
    }
    if !input.peek(Token![=]) {
        return Err(Error::new(
            next_span(input, pat.span()),
            format!(
                "expected `=` and a future after the branch's pattern: {BRANCH_SHAPE}; write \
                 `_ = future => ..` to ignore the output"
            ),
        ));
    }
    input.parse::<Token![=]>()?;
    let fut: Expr = input.parse()?;
    if let Expr::Path(path) = &fut {
        if path.qself.is_none() && path.path.is_ident("default") {
            return Err(Error::new(
                fut.span(),
                "`default` takes no pattern: write `default => body` (it runs when no branch is \
                 ready on the first poll)",
            ));
        }
    }
    let mut cond = None;
    if input.peek(Token![,]) && input.peek2(Token![if]) {
        input.parse::<Token![,]>()?;
        input.parse::<Token![if]>()?;
        cond = Some(input.parse::<Expr>()?);
    }
    if !input.peek(Token![=>]) {
        let fallback = cond.as_ref().unwrap_or(&fut).span();
        return Err(Error::new(
            next_span(input, fallback),
            format!("expected `=>` and the branch's body after its future: {BRANCH_SHAPE}"),
        ));
    }
    input.parse::<Token![=>]>()?;
    let body = parse_body(input)?;
    Ok(Branch {
        pat,
        fut,
        cond,
        body,
    })
}

/// A branch's body, as a `match` arm's: a block-like body (`{ .. }`, `if`, `match`, loops,
/// `unsafe { .. }`) may omit the comma that separates it from the next branch; any other needs it.
/// Block-like bodies are parsed as exactly that expression, so a next branch's pattern such as
/// `(a, b)` or `&x` is not taken for a call or an operand.
fn parse_body(input: ParseStream) -> syn::Result<Expr> {
    let block_like = if input.peek(token::Brace) {
        Some(Expr::Block(ExprBlock {
            attrs: Vec::new(),
            label: None,
            block: input.parse()?,
        }))
    } else if input.peek(Token![if]) {
        Some(Expr::If(input.parse()?))
    } else if input.peek(Token![match]) {
        Some(Expr::Match(input.parse()?))
    } else if input.peek(Token![loop]) {
        Some(Expr::Loop(input.parse()?))
    } else if input.peek(Token![while]) {
        Some(Expr::While(input.parse()?))
    } else if input.peek(Token![for]) {
        Some(Expr::ForLoop(input.parse()?))
    } else if input.peek(Token![unsafe]) {
        Some(Expr::Unsafe(input.parse()?))
    } else {
        None
    };
    let is_block_like = block_like.is_some();
    let body = match block_like {
        Some(body) => body,
        None => input.parse::<Expr>()?,
    };
    if input.peek(Token![,]) {
        input.parse::<Token![,]>()?;
    } else if !input.is_empty() && !is_block_like {
        return Err(Error::new(
            input.span(),
            "expected `,` before this branch: a branch whose body is not a `{ .. }` block ends \
             with a comma",
        ));
    }
    Ok(body)
}

/// The pattern used to test a ready output without consuming it: matched against `&output`, so
/// `ref`/`mut` binding modifiers and `&` patterns (which the by-reference default binding mode
/// rejects) are removed; whether it matches is unchanged.
fn check_pattern(pat: &Pat) -> Pat {
    let mut pat = pat.clone();
    clean(&mut pat);
    reference_top_literals(&mut pat);
    pat
}

/// A string literal pattern is a reference pattern: matching `&output` does not look through the
/// added `&` for it, so at the top level (where that `&` is) it gets a `&` of its own.
fn reference_top_literals(pat: &mut Pat) {
    match pat {
        Pat::Lit(lit) if matches!(lit.lit, Lit::Str(_) | Lit::ByteStr(_) | Lit::CStr(_)) => {
            let and = Token![&](lit.span());
            *pat = Pat::Reference(PatReference {
                attrs: Vec::new(),
                and_token: and,
                mutability: None,
                pat: Box::new(pat.clone()),
            });
        }
        Pat::Or(or) => or.cases.iter_mut().for_each(reference_top_literals),
        Pat::Paren(paren) => reference_top_literals(&mut paren.pat),
        Pat::Ident(ident) => {
            if let Some((_, sub)) = &mut ident.subpat {
                reference_top_literals(sub);
            }
        }
        _ => {}
    }
}

fn clean(pat: &mut Pat) {
    match pat {
        Pat::Ident(ident) => {
            ident.by_ref = None;
            ident.mutability = None;
            if let Some((_, sub)) = &mut ident.subpat {
                clean(sub);
            }
        }
        Pat::Or(or) => or.cases.iter_mut().for_each(clean),
        Pat::Paren(paren) => clean(&mut paren.pat),
        Pat::Reference(reference) => {
            let mut inner = (*reference.pat).clone();
            clean(&mut inner);
            *pat = inner;
        }
        Pat::Slice(slice) => slice.elems.iter_mut().for_each(clean),
        Pat::Struct(strukt) => strukt.fields.iter_mut().for_each(|f| clean(&mut f.pat)),
        Pat::Tuple(tuple) => tuple.elems.iter_mut().for_each(clean),
        Pat::TupleStruct(tuple) => tuple.elems.iter_mut().for_each(clean),
        Pat::Type(typed) => clean(&mut typed.pat),
        _ => {}
    }
}

impl Select {
    fn expand(self) -> TokenStream {
        let site = Span::mixed_site();
        let n = self.branches.len();
        let output = Ident::new("__CoroSelectOutput", site);
        let variants: Vec<Ident> = (0..n)
            .map(|i| Ident::new(&format!("Branch{i}"), site))
            .collect();
        let params: Vec<Ident> = (0..n).map(|i| Ident::new(&format!("T{i}"), site)).collect();
        let futs: Vec<Ident> = (0..n)
            .map(|i| Ident::new(&format!("__coro_select_fut{i}"), site))
            .collect();

        let default_variant = self
            .default
            .as_ref()
            .map(|_| quote_spanned!(site=> Default,));
        let else_variant = self
            .else_
            .as_ref()
            .map(|_| quote_spanned!(site=> AllDisabled,));

        let pins = self.branches.iter().zip(&futs).map(|(branch, fut)| {
            let expr = &branch.fut;
            let some = quote_spanned! {site=>
                ::core::option::Option::Some(::core::future::IntoFuture::into_future(#expr))
            };
            let init = match &branch.cond {
                None => some,
                Some(cond) => quote_spanned! {site=> {
                    let __coro_select_enabled: bool = #cond;
                    if __coro_select_enabled { #some } else { ::core::option::Option::None }
                }},
            };
            quote_spanned!(site=> let mut #fut = ::core::pin::pin!(#init);)
        });

        let polls = self.branches.iter().enumerate().map(|(i, branch)| {
            let (fut, variant) = (&futs[i], &variants[i]);
            let check = check_pattern(&branch.pat);
            quote_spanned! {site=>
                #i => {
                    if let ::core::option::Option::Some(__coro_select_f) = #fut.as_mut().as_pin_mut() {
                        match ::core::future::Future::poll(__coro_select_f, __coro_select_cx) {
                            ::core::task::Poll::Ready(__coro_select_value) => {
                                #[allow(unused_variables, clippy::match_like_matches_macro)]
                                let __coro_select_matches = match &__coro_select_value {
                                    #check => true,
                                    #[allow(unreachable_patterns)]
                                    _ => false,
                                };
                                if __coro_select_matches {
                                    return ::core::task::Poll::Ready(
                                        #output::#variant(__coro_select_value),
                                    );
                                }
                                // Refuted: the branch is disabled, its future dropped now.
                                #fut.set(::core::option::Option::None);
                            }
                            ::core::task::Poll::Pending => __coro_select_pending = true,
                        }
                    }
                }
            }
        });

        let start = if self.biased || n == 1 {
            quote_spanned!(site=> 0usize)
        } else {
            quote_spanned!(site=> ::coro::__private::select_start(#n))
        };
        let when_pending = if self.default.is_some() {
            // Go's `default`: nothing was ready on the first (and only) round.
            quote_spanned!(site=> ::core::task::Poll::Ready(#output::Default))
        } else {
            quote_spanned!(site=> ::core::task::Poll::Pending)
        };
        let when_all_disabled = if self.else_.is_some() {
            quote_spanned!(site=> ::core::task::Poll::Ready(#output::AllDisabled))
        } else if self.default.is_some() {
            quote_spanned!(site=> ::core::task::Poll::Ready(#output::Default))
        } else {
            quote_spanned!(site=> ::coro::__private::select_all_disabled())
        };

        let arms = self
            .branches
            .iter()
            .zip(&variants)
            .map(|(branch, variant)| {
                let (pat, body) = (&branch.pat, &branch.body);
                quote_spanned!(site=> #output::#variant(#pat) => #body,)
            });
        let default_arm = self
            .default
            .as_ref()
            .map(|body| quote_spanned!(site=> #output::Default => #body,));
        let else_arm = self
            .else_
            .as_ref()
            .map(|body| quote_spanned!(site=> #output::AllDisabled => #body,));

        quote_spanned! {site=> {
            #[allow(non_camel_case_types, clippy::large_enum_variant)]
            enum #output<#(#params),*> {
                #(#variants(#params),)*
                #default_variant
                #else_variant
            }
            let __coro_select_output = {
                #(#pins)*
                ::core::future::poll_fn(|__coro_select_cx| {
                    let __coro_select_start: usize = #start;
                    let mut __coro_select_pending = false;
                    for __coro_select_offset in 0..#n {
                        let mut __coro_select_branch = __coro_select_start + __coro_select_offset;
                        if __coro_select_branch >= #n {
                            __coro_select_branch -= #n;
                        }
                        match __coro_select_branch {
                            #(#polls)*
                            _ => ::core::unreachable!(),
                        }
                    }
                    if __coro_select_pending { #when_pending } else { #when_all_disabled }
                })
                .await
            };
            match __coro_select_output {
                #(#arms)*
                #default_arm
                #else_arm
                // A refutable pattern already matched this output by reference in the poll.
                #[allow(unreachable_patterns)]
                _ => ::core::unreachable!("coro::select!: a branch's output stopped matching its pattern"),
            }
        }}
    }
}

/// Entry point: parse, expand, or report the problem at the offending tokens.
pub(crate) fn select(input: TokenStream) -> TokenStream {
    match syn::parse2::<Select>(input) {
        Ok(select) => select.expand(),
        Err(e) => e.to_compile_error(),
    }
}
