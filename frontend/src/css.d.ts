// esbuild's text loader turns a .css import into its source string.
declare module "*.css" {
  const css: string;
  export default css;
}
