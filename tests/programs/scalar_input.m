function P = scalar_input(P0, A, d)
  % a scalar input used as a scalar, without a pragma
  % test inputs: P0=randn(4,4) A=randn(4,4) d=0.5
  P = d * (P0 * A);
  P = P + d^2 * A;
end
