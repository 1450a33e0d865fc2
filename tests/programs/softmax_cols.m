function P = softmax_cols(S)
  % column-wise softmax
  % test inputs: S=randn(5,4)
  E = exp(S - max(S));
  P = E ./ sum(E);
end
