function [lambda, v, G] = power_method_tol(X)
  % dominant eigenpair of X'X by power iteration until the vector settles, next to a
  % maintained Gram matrix
  % test inputs: X=randn(12,4)
  G = X' * X;
  v = ones(columns(X), 1) / sqrt(columns(X));
  change = 1;
  k = 0;
  while change > 1e-13 && k < 20000
    w = G * v;
    vn = w / norm(w);
    change = norm(vn - v, 1);
    v = vn;
    k = k + 1;
  end
  lambda = v' * G * v;
end
