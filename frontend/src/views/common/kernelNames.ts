/**
 * Short kernel names for legends and chart labels (pure, unit-tested under node by
 * frontend/test/names_sources.test.ts). CUDA kernel names are demangled C++ signatures, often 300+ characters
 * ("void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, …> >(at::native::ReduceOp<…>)"), or
 * still mangled ("_ZN17cutlass__5x_cudnn6KernelI…"): a legend cut at 40 characters shows only "void at::native::…".
 * The short form drops the return type, the parameters, the namespaces and the template arguments
 * ("reduce_kernel<…>"); the full name stays in the hover and in the tables.
 */

/** Index of the `close` matching the `open` at `start` (nesting counted), or the string's length. */
function matching(s: string, start: number, open: string, close: string): number {
  let depth = 0;
  for (let i = start; i < s.length; i++) {
    if (s[i] === open) depth++;
    else if (s[i] === close && --depth === 0) return i;
  }
  return s.length;
}

/** The text with every top-level `<…>` replaced by "<…>" and the top-level parameter list cut. */
function elideTemplates(s: string): string {
  let out = "";
  for (let i = 0; i < s.length; i++) {
    const c = s[i] ?? "";
    if (c === "(") break;
    if (c === "<") {
      out += "<…>";
      i = matching(s, i, "<", ">");
    } else {
      out += c;
    }
  }
  return out.trim();
}

/** Length-prefixed identifiers of an Itanium-mangled name (`_ZN17cutlass__5x_cudnn6KernelI…`), in order. */
function mangledParts(s: string): { name: string[]; arg: string[] } {
  const name: string[] = [];
  const arg: string[] = [];
  let inArgs = false;
  for (let i = s.startsWith("_ZN") ? 3 : 2; i < s.length; ) {
    const m = /^\d+/.exec(s.slice(i));
    if (m) {
      const len = Number(m[0]);
      const id = s.slice(i + m[0].length, i + m[0].length + len);
      (inArgs ? arg : name).push(id);
      i += m[0].length + len;
      continue;
    }
    if (s[i] === "I") {
      if (inArgs && arg.length) break;
      inArgs = true;
    } else if (s[i] === "E" && !inArgs) break;
    i++;
  }
  return { name, arg };
}

function shortMangled(s: string): string {
  const { name, arg } = mangledParts(s);
  const base = name[name.length - 1];
  if (base === undefined) return s;
  const first = arg[arg.length - 1];
  return first === undefined ? base : `${base}<${first}<…>>`;
}

/** "void at::native::reduce_kernel<128, 4, …>(…)" → "reduce_kernel<…>"; plain names stay as they are. */
export function shortKernelName(name: string): string {
  const s = name.trim();
  if (/^_Z\w+$/.test(s)) return shortMangled(s);
  const bare = s.replace(/\(anonymous namespace\)::/g, "").replace(/^(?:__global__\s+)?void\s+/, "");
  const elided = elideTemplates(bare);
  const last = elided.lastIndexOf("::");
  const out = last >= 0 ? elided.slice(last + 2) : elided;
  // not a C++ name (nothing before "<", or nothing left): the name as it is
  return /^[A-Za-z_~]/.test(out) ? out : s;
}

/** The functor a templated kernel applies ("MulFunctor", "sum_functor", "MeanOps"): the last one named. */
function functorHint(name: string): string | null {
  const found = name.match(/\w*(?:Functor|functor|Ops)\w*/g);
  return found && found.length ? (found[found.length - 1] ?? null) : null;
}

/**
 * Short names for a list of kernels: each name's short form, and where two kernels share one, the functor they
 * apply after it ("elementwise_kernel<…> (MulFunctor)"); names still equal are told apart by the legend.
 */
export function shortKernelNames(names: readonly string[]): Map<string, string> {
  const short = new Map(names.map((n) => [n, shortKernelName(n)]));
  const count = new Map<string, number>();
  for (const s of short.values()) count.set(s, (count.get(s) ?? 0) + 1);
  for (const [full, s] of short) {
    if ((count.get(s) ?? 0) < 2) continue;
    const hint = functorHint(full);
    if (hint) short.set(full, `${s} (${hint})`);
  }
  return short;
}
