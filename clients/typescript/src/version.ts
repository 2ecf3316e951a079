// The package's version, sent in the user agent (the tests check it matches package.json).

export const VERSION = "0.1.0";
